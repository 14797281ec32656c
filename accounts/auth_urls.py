"""allauth's pages under /accounts/, with our log-in view in front (a lockout answers 429)."""

from django.urls import include, path

from accounts import views

urlpatterns = [
    path("login/", views.login, name="account_login"),
    path("", include("allauth.urls")),
]
