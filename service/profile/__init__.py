"""Workload profiling from request logs: lengths, prefix sharing, radix reuse, concurrency, request rate."""

from service.profile.chat_template import ChatTemplate, ChatTemplateError
from service.profile.prefix import longest_earlier_matches, radix_reuse_rate, sharing_rate
from service.profile.records import LogRecord, MalformedLine, parse_line
from service.profile.tokenize import SegmentTokenizer, TokenizerNotFound, load_tokenizer
from service.profile.trace import TraceTimesMissing, log_trace, profile_trace
from service.profile.workload import ProfileError, profile_log, read_log

__all__ = [
    "ChatTemplate", "ChatTemplateError", "LogRecord", "MalformedLine", "ProfileError", "SegmentTokenizer", "TokenizerNotFound", "TraceTimesMissing",
    "load_tokenizer", "log_trace", "longest_earlier_matches", "parse_line", "profile_log", "profile_trace",
    "radix_reuse_rate", "read_log", "sharing_rate",
]
