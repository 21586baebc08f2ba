// cspstyle.js - lets xterm.js style itself under the dashboard's CSP (style-src 'self', no
// 'unsafe-inline'), which refuses every <style> element and style attribute.  xterm.js writes its
// measured cell sizes and theme into <style> elements it creates, and 24-bit colours into style
// attributes (setAttribute), and offers no nonce (xterm.js issue 4445).  Both are writes by
// script, so they are turned into CSSOM writes, which the CSP permits:
//   - document.createElement("style") makes an inert, hidden element instead (even an empty
//     <style> is refused): what is written to its textContent goes into a constructed style
//     sheet adopted by the document, dropped when the element is removed;
//   - setAttribute("style", v) sets el.style.cssText.
// Nothing parsed from markup goes through either, so injected HTML stays refused as before; and
// the dashboard itself never makes <style> or style attributes.  Imported once, by terminal.js.
const createElement = Document.prototype.createElement;
const setAttribute = Element.prototype.setAttribute;

function adoptedStyle(doc) {
  const el = createElement.call(doc, "brig-style");
  el.hidden = true;
  const sheet = new CSSStyleSheet();
  let text = "";
  doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
  Object.defineProperty(el, "textContent", {
    get: () => text,
    set: (v) => {
      text = String(v ?? "");
      sheet.replaceSync(text);
    },
  });
  const remove = el.remove;
  el.remove = function () {
    doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => s !== sheet);
    remove.call(this);
  };
  return el;
}

Document.prototype.createElement = function (tag, options) {
  return String(tag).toLowerCase() === "style" ? adoptedStyle(this) : createElement.call(this, tag, options);
};

Element.prototype.setAttribute = function (name, value) {
  if (String(name).toLowerCase() === "style" && this.style) this.style.cssText = String(value);
  else setAttribute.call(this, name, value);
};
