from django.urls import path

from budgets import views

urlpatterns = [
    path("", views.budget, name="budget"),
    path("instances/<uuid:pk>/", views.instance_cap, name="budget_instance_cap"),
]
