from django.urls import path
from rest_framework.routers import SimpleRouter

from instances import api, staff_api

router = SimpleRouter()
router.register("instances", api.InstanceViewSet, basename="api-instance")
router.register("quota/requests", api.QuotaRequestViewSet, basename="api-quota-request")
router.register("staff/quota/requests", staff_api.StaffQuotaRequestViewSet, basename="api-staff-quota-request")
router.register("images", api.SavedImageViewSet, basename="api-image")
router.register("snapshots", api.SnapshotViewSet, basename="api-snapshot")
router.register("reservations", api.ReservationViewSet, basename="api-reservation")
router.register("staff/reservations", staff_api.StaffReservationViewSet, basename="api-staff-reservation")

urlpatterns = [
    path("catalogue/", api.CatalogueView.as_view(), name="api-catalogue"),
    path("quota/", api.QuotaView.as_view(), name="api-quota"),
    *router.urls,
]
