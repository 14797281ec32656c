from django.urls import path

from devicelogin import api

urlpatterns = [
    path("", api.DeviceStartView.as_view(), name="api-device-start"),
    path("token/", api.DeviceTokenView.as_view(), name="api-device-token"),
]
