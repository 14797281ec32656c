from django.urls import path

from budgets import views

urlpatterns = [path("", views.budget, name="budget")]
