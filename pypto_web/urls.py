"""Root routes: the API under /api/, pages from frontend, admin, schema, language switch."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import IsAuthenticated

urlpatterns = [
    path("admin/", admin.site.urls),
    # signed-in only, as the reference page that links it: the API's map is not for anonymous visitors
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="api-schema"),
    path("api/", include("profiles.urls")),
    path("api/", include("analysis.urls")),
    path("", include("captures.urls")),
    path("", include("frontend.urls")),
]
