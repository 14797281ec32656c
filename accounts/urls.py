from django.urls import path

from accounts import views

urlpatterns = [
    path("", views.profile, name="account_profile"),
    path("ssh-keys/", views.ssh_keys, name="account_ssh_keys"),
    path("ssh-keys/<int:key_id>/delete/", views.ssh_key_delete, name="account_ssh_key_delete"),
    path("api-tokens/", views.api_tokens, name="account_api_tokens"),
    path("api-tokens/<int:token_id>/revoke/", views.api_token_revoke, name="account_api_token_revoke"),
    path("security/", views.security_log, name="account_security_log"),
]
