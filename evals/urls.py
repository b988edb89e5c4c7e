from django.urls import path

from . import views

app_name = "evals"

urlpatterns = [
    path("runs/", views.run_list, name="run-list"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run-detail"),
]
