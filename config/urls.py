"""URL wiring: the dashboard apps, auth, admin and a health check."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponse
from django.urls import include, path
from django.views.generic import RedirectView


def healthz(request):
    return HttpResponse("ok", content_type="text/plain")


handler400 = "core.http.bad_request"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="evals:run-list", permanent=False)),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("healthz", healthz),
    path("api/", include("config.api_router")),
    path("", include("evals.urls")),
    path("", include("labeling.urls")),
    path("", include("judges.urls")),
    path("", include("apitokens.urls")),
    path("", include("interop.urls")),
]
