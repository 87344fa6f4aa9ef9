"""Browser forms of the pages of issue 2."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from profiles.models import Role


class ProjectForm(forms.Form):
    name = forms.CharField(label=_("Project name"), max_length=200)
    description = forms.CharField(label=_("Description"), required=False,
                                  widget=forms.Textarea(attrs={"rows": 2}))


class InviteForm(forms.Form):
    username = forms.CharField(label=_("Username"), max_length=150)
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.VIEWER)
