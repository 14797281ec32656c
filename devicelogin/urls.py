from django.urls import path

from devicelogin import views

urlpatterns = [path("", views.device_login, name="device_login")]
