"""``manage.py token_create USER NAME``: create an API token and print it once."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apitokens.tokens import token_create


class Command(BaseCommand):
    help = "Create an API token for USER named NAME; the token is printed once."

    def add_arguments(self, parser):
        parser.add_argument("user")
        parser.add_argument("name")

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"user: no user named {options['user']!r}")
        try:
            _, token = token_create(user=user, name=options["name"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(token)
