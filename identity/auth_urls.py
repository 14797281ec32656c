from django.urls import path

from identity import views

# Under /accounts/phone/, beside allauth's pages: log in (or sign up) with a mobile number.
urlpatterns = [path("", views.phone_login, name="identity_phone_login")]
