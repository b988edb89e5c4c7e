"""The form a lead fills to create an API token for a user (usually a CI account)."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from apitokens.tokens import token_user_problem
from core.forms import StorableForm


class TokenCreateForm(StorableForm):
    """``user``: an active account the lead may create a token for (``token_user_problem``);
    ``name``: what the token is for (1 to 200 characters).
    """

    def __init__(self, *args, by=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.by = by

    def clean_user(self):
        user = self.cleaned_data["user"]
        if self.by is not None and (problem := token_user_problem(user=user, by=self.by)):
            raise forms.ValidationError(problem)
        return user

    user = forms.ModelChoiceField(
        queryset=get_user_model().objects.filter(is_active=True).order_by("username"),
        to_field_name="username",
        help_text="The token acts as this user, with its roles.",
    )
    name = forms.CharField(max_length=200, help_text="What it is for, e.g. 'CI on main'.")
