from django.urls import path

from apitokens import views

app_name = "apitokens"

urlpatterns = [
    path("api-tokens/", views.token_list, name="token-list"),
    path("api-tokens/<uuid:token_id>/revoke/", views.token_revoke_view, name="token-revoke"),
]
