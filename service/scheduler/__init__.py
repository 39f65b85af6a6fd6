"""Scheduled auto-tuning: cron schedules stored in the project's tables, fired through APScheduler."""

from service.scheduler.cron import CronError, cron_trigger, next_fire_time
from service.scheduler.runner import ScheduleRunner

__all__ = ["CronError", "ScheduleRunner", "cron_trigger", "next_fire_time"]
