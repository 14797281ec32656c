"""allauth's pages under /accounts/, with our log-in and second-step views in front (a lockout answers 429)."""

from django.urls import include, path

from accounts import two_factor, views

urlpatterns = [
    path("login/", views.login, name="account_login"),
    path("2fa/authenticate/", two_factor.authenticate, name="mfa_authenticate"),
    path("2fa/webauthn/keys/<int:pk>/remove/", two_factor.remove_webauthn, name="mfa_remove_webauthn"),
    path("", include("allauth.urls")),
]
