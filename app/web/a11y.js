// Keyboard and ARIA repairs to Gradio 6.31's markup (issue 59), put first in the page's head with
// app/status_timer.js (app/page_script.py). Everything here listens on the document, so it needs no element to exist
// yet and holds for every element Gradio draws later.
(() => {
  // The tabs (New run, Runs, Monitor, ...) answer the arrow keys, Home and End as WAI-ARIA's tabs pattern asks; Gradio's
  // tab buttons only answered Tab and Enter. The focused tab is opened at once (activation follows focus), as a click
  // on it would: it runs the same handlers (the address, the page's polls).
  const TAB_KEYS = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
  const onTabKey = (event, tab) => {
    const tabs = [...tab.closest("[role=tablist]").querySelectorAll("button[role=tab]")].filter((b) => b.offsetParent);
    const at = tabs.indexOf(tab);
    let next;
    if (event.key === "Home") next = 0;
    else if (event.key === "End") next = tabs.length - 1;
    else if (event.key in TAB_KEYS) next = (at + TAB_KEYS[event.key] + tabs.length) % tabs.length;
    else return;
    event.preventDefault();
    tabs[next].focus();
    tabs[next].click();
  };
  // A row of a read-only table (the Monitor's completions, the Runs table) opens with Enter or Space on one of its
  // cells, as a click on it does: Gradio's grid moves between cells by the arrow keys but tells the page of a chosen
  // row only on a click, read from the mouse button going down (so a bare element.click() does nothing).
  const onCellKey = (event, cell) => {
    if (event.key !== "Enter" && event.key !== " ") return;
    event.preventDefault();
    event.stopPropagation();
    for (const type of ["mousedown", "mouseup", "click"]) {
      cell.dispatchEvent(new MouseEvent(type, { bubbles: true, cancelable: true, button: 0, view: window }));
    }
  };
  document.addEventListener(
    "keydown",
    (event) => {
      const target = event.target;
      if (!(target instanceof Element) || event.altKey || event.ctrlKey || event.metaKey) return;
      if (target.matches("[role=tablist] button[role=tab]")) onTabKey(event, target);
      else if (target.matches("[role=grid][aria-readonly=true] [role=gridcell]")) onCellKey(event, target);
    },
    true,
  );

  // Gradio's placeholder of a component without a value (a File, a Plot) is a <div aria-label="Empty value">: a
  // label on an element of no role, which assistive technology ignores (axe-core: aria-prohibited-attr). It shows an
  // icon, so it is given the role of one, as it is added (only the added elements are looked at; an idle page is
  // not looked at at all).
  const EMPTY = "div.empty[aria-label]:not([role])";
  new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) {
        if (!(node instanceof Element)) continue;
        if (node.matches(EMPTY)) node.setAttribute("role", "img");
        else if (node.firstElementChild) for (const empty of node.querySelectorAll(EMPTY)) empty.setAttribute("role", "img");
      }
    }
  }).observe(document.documentElement, { childList: true, subtree: true });
})();
