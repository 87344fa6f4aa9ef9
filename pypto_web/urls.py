"""Root routes: the API under /api/, pages from frontend, admin, schema, language switch."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include("profiles.urls")),
    path("api/", include("analysis.urls")),
    path("", include("captures.urls")),
    path("", include("frontend.urls")),
]
