"""The Celery app of worker tests whose tasks enqueue tasks (a top-up's rounds): the
project's app with its default queue set to the test's own queue (``ASSAY_TEST_QUEUE``), so
a task the worker sends (a round's chunks, the next look) reaches the same worker and no
other. ``celery -A tests.worker_app worker --queues $ASSAY_TEST_QUEUE``. Remote control is
on, for the tests that move a queue between workers."""

import os

from config.celery import app

app.conf.task_default_queue = os.environ["ASSAY_TEST_QUEUE"]
# The filesystem broker is polled (every second by default): poll faster, so a top-up's
# looks follow each other in a test's time.
if str(app.conf.broker_url).startswith("filesystem"):
    app.conf.broker_transport_options = {
        **app.conf.broker_transport_options,
        "polling_interval": 0.1,
    }
# The embedded default turns remote control off (config/settings.py); a test that hands a
# queue from one worker to the next (``app.control.add_consumer``) needs it on.
app.conf.worker_enable_remote_control = True

__all__ = ["app"]
