// Small progressive enhancements; every page works without them.
(function () {
  "use strict";
  // Copy buttons: <button data-copy="#element-id"> or data-copy-text="literal".
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy], [data-copy-text]");
    if (!button) return;
    var text = button.getAttribute("data-copy-text");
    if (text === null) {
      var target = document.querySelector(button.getAttribute("data-copy"));
      text = target ? target.textContent.trim() : "";
    }
    var done = function () {
      var label = button.textContent;
      button.textContent = button.getAttribute("data-copied-label") || "✓";
      setTimeout(function () { button.textContent = label; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
    } else {
      var area = document.createElement("textarea");
      area.value = text; document.body.appendChild(area); area.select();
      try { document.execCommand("copy"); done(); } finally { area.remove(); }
    }
  });
  // <form data-confirm="Sure?">: asks first (not inline onsubmit: the Content-Security-Policy allows no
  // inline script). Captured at the document, so a refusal stops htmx's handler on the form as well.
  document.addEventListener("submit", function (event) {
    var form = event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.getAttribute("data-confirm"))) {
      event.preventDefault();
      event.stopPropagation();
    }
  }, true);
  // <select data-autosubmit>: a choice submits its form (the language switch).
  document.addEventListener("change", function (event) {
    var field = event.target.closest("[data-autosubmit]");
    if (field && field.form) field.form.submit();
  });
  // allauth's passkey script (static/mfa/js/webauthn.js) reports a refused or cancelled ceremony as an
  // "allauth.error" event: say so on the page ([data-webauthn-error]) rather than only in the console.
  document.addEventListener("allauth.error", function (event) {
    var note = document.querySelector("[data-webauthn-error]");
    if (!note) return;
    note.hidden = false;
    event.preventDefault();
  });
  // Close an open <details class="menu"> when clicking elsewhere.
  document.addEventListener("click", function (event) {
    document.querySelectorAll("details.menu[open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.removeAttribute("open");
    });
  });
})();
