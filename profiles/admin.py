from django.contrib import admin

from profiles.models import Invitation, Membership, Profile, Project, UploadSession


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "created_by", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "user", "role", "status", "created_at"]
    list_filter = ["status", "role"]


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "project", "status", "progress", "detected_format", "size", "created_at"]
    list_filter = ["status", "detected_format"]
    search_fields = ["name", "original_filename", "sha256"]
    readonly_fields = ["sha256", "size", "archive", "summary", "lease_until"]


@admin.register(UploadSession)
class UploadSessionAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "filename", "received", "size", "status", "updated_at"]
    list_filter = ["status"]
