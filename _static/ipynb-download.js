// The download menu of a chapter page (sphinx-book-theme) links the chapter's
// .ipynb in a new tab, where a browser shows the JSON instead of saving the file.
// The HTML `download` attribute makes the link save it under the chapter's name.
document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll("a.btn-download-source-button")) {
    const href = link.getAttribute("href") || "";
    if (href.endsWith(".ipynb")) {
      link.setAttribute("download", href.split("/").pop());
      link.removeAttribute("target");
    }
  }
});
