// The book's source archive (book/_ext/source_archive.py writes it to
// _downloads/msresnet-book.tar.gz; the {source-archive} role links it). A command
// block that fetches it says ARCHIVE_URL; this puts in the archive's full address
// as this copy of the book serves it (http(s):// or file://), so the block can be
// pasted (sphinx-copybutton copies the text shown). Pages without the link keep
// the placeholder. tests/test_source_archive.py runs the filled-in block.
document.addEventListener("DOMContentLoaded", () => {
  const link = document.querySelector("a.source-archive");
  if (!link) return;
  const url = new URL(link.getAttribute("href"), document.baseURI).href;
  for (const pre of document.querySelectorAll("article pre")) {
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.nodeValue.includes("ARCHIVE_URL")) {
        node.nodeValue = node.nodeValue.replaceAll("ARCHIVE_URL", url);
        pre.classList.add("source-archive-url");
      }
    }
  }
});
