from django.urls import path

from accounts import views

urlpatterns = [
    path("", views.profile, name="account_profile"),
    path("ssh-keys/", views.ssh_keys, name="account_ssh_keys"),
    path("api-tokens/", views.api_tokens, name="account_api_tokens"),
]
