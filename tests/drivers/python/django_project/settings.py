"""Django settings for the driver test: the contrib apps every project starts with, and
`shop`. The database is the hotledger server the test started."""
import os

SECRET_KEY = "driver-test"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.admin",
    "django.contrib.messages",
    "shop",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "ledger",
        "USER": "ledger",
        "PASSWORD": os.environ["HOTLEDGER_PASSWORD"],
        "HOST": "127.0.0.1",
        "PORT": os.environ["HOTLEDGER_PORT"],
    }
}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
