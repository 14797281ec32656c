from django.urls import path

from metrics import api

urlpatterns = [
    path("instances/<uuid:pk>/metrics/", api.InstanceMetricsView.as_view(), name="api-instance-metrics"),
]
