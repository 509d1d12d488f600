"""What changes the world, in rooms by subject: jobs/ (templates, planning, the watcher and the backends),
promotions/, alerts/, evidence/ (from a job to a diagnosis) and state/ (the database, its tables and
migrations). Each takes typed requests, never argparse objects, HTTP bodies or Slack ids, and raises the
errors of errors.py; settings.py is the one settings object."""
