from django.urls import path

from invoices import views

urlpatterns = [
    path("", views.staff_queue, name="invoices_staff"),
    path("<int:invoice_id>/<str:action>/", views.staff_decide, name="invoices_staff_decide"),
]
