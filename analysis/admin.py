from django.contrib import admin

from analysis.models import AnalysisRun, Artifact, Comparison, Finding


@admin.register(AnalysisRun)
class AnalysisRunAdmin(admin.ModelAdmin):
    list_display = ["id", "profile", "kind", "status", "progress", "attempts", "started_at", "finished_at"]
    list_filter = ["kind", "status"]


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    list_display = ["id", "profile", "rule", "severity", "title"]
    list_filter = ["rule", "severity"]


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ["id", "profile", "name", "kind", "version", "size"]


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "base", "candidate", "status", "created_at"]
