from django.urls import path

from identity import views

# Under /account/identity/: the account's mobile number and real name.
urlpatterns = [
    path("", views.identity_settings, name="identity_settings"),
    path("phone/", views.phone_change, name="identity_phone_change"),
    path("real-name/individual/", views.real_name_individual, name="identity_real_name_individual"),
    path("real-name/organisation/", views.real_name_organisation, name="identity_real_name_organisation"),
]
