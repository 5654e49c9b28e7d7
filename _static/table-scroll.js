// A table wider than the page scrolls inside its own box (book.css), as the results
// page's per-epoch table does on a phone; nothing said so, and the columns past the
// box's edge were simply out of sight (issue 44). This marks every table box that
// scrolls ("scrolls") and whether its right end is in view ("at-end"); book.css then
// fades the box's right edge while more columns lie beyond it.
(function () {
  "use strict";
  const BOXES = "article .pst-scrollable-table-container";

  function mark(box) {
    const scrolls = box.scrollWidth > box.clientWidth + 1;
    const atEnd = box.scrollLeft + box.clientWidth >= box.scrollWidth - 1;
    box.classList.toggle("scrolls", scrolls);
    box.classList.toggle("at-end", !scrolls || atEnd);
  }

  function markAll() {
    document.querySelectorAll(BOXES).forEach(mark);
  }

  function start() {
    document.querySelectorAll(BOXES).forEach(function (box) {
      box.addEventListener("scroll", function () { mark(box); }, { passive: true });
    });
    markAll();
    window.addEventListener("resize", markAll);
    window.addEventListener("load", markAll);  // fonts and images change widths
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
