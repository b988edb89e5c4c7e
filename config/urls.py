"""URL wiring: the dashboard apps, auth, admin, health, readiness and metrics."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from core import views as core_views

handler400 = "core.http.bad_request"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="evals:run-list", permanent=False)),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("healthz", core_views.healthz, name="healthz"),
    path("readyz", core_views.readyz, name="readyz"),
    path("metrics", core_views.metrics, name="metrics"),
    path("api/", include("config.api_router")),
    path("", include("evals.urls")),
    path("", include("labeling.urls")),
    path("", include("judges.urls")),
    path("", include("apitokens.urls")),
    path("", include("interop.urls")),
]
