from django.urls import path

from instances import staff_views

urlpatterns = [
    path("", staff_views.staff_reservations, name="staff_reservations"),
    path("<int:pk>/cancel/", staff_views.staff_reservation_cancel, name="staff_reservation_cancel"),
]
