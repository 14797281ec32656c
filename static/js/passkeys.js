// Passkeys (WebAuthn) on the console's pages, with allauth's own script (static/mfa/js/webauthn.js).
// allauth starts its forms from inline JSON blocks (<script data-allauth-onload>); the console keeps
// inline script out of its templates (SECURE_CSP, tests/security), so the button that starts the
// ceremony says what it needs in data attributes instead:
//   data-webauthn="add | authenticate | login"  which of allauth's forms
//   data-credential="<id>"                     the hidden input the browser's answer goes into
//   data-options="<id>"                        the json_script element with the server's options
//   data-passwordless="<id>"                   (add) the "passkey" checkbox
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var forms = window.allauth && window.allauth.webauthn && window.allauth.webauthn.forms;
    if (!forms) return;
    document.querySelectorAll("[data-webauthn]").forEach(function (button) {
      var ids = { credential: button.dataset.credential };
      if (button.dataset.options) ids.data = button.dataset.options;
      switch (button.dataset.webauthn) {
        case "add":
          ids.add = button.id;
          if (button.dataset.passwordless) ids.passwordless = button.dataset.passwordless;
          forms.addForm({ ids: ids });
          break;
        case "authenticate":
          ids.authenticate = button.id;
          forms.authenticateForm({ ids: ids });
          break;
        case "login":
          ids.login = button.id;
          forms.loginForm({ ids: ids });
          break;
      }
    });
  });
})();
