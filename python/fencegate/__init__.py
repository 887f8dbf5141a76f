"""fencegate: the controller side of fencegate's protocol, in Python.

Connect to the broker with :class:`Client`, learn an actuator's fence scope
(:meth:`Client.scope`), hold the scope's lease in etcd (:func:`acquire`,
whose token is the lock key's create_revision), and send tokenized
commands (:meth:`Client.send`), which return the gateway's answer or raise
:class:`StaleError`, :class:`RejectedError`, :class:`FailedError` or
:class:`Timeout`. docs/protocol.md is the wire contract; the Go packages
``client`` and ``lease`` are the reference this package follows.
"""

from .client import DEFAULT_RESEND, MAX_RESEND, Client
from .errors import (AheadError, AnswerError, BrokerError, EtcdError, FailedError, FencegateError, KeyFileError, LeaseLost,
                     OutputError, RejectedError, StaleError, Timeout, UnknownActuator)
from .heartbeat import Heartbeat
from .lease import Etcd, Lease, acquire, check_fence, lock_name
from .seq import Seq
from .signing import Signer, read_private_key
from .wire import ActuatorState, Answer, Command, Fence, InvalidCommand, InvalidTopic, Topics, parse_duty

__all__ = [
    "Client", "DEFAULT_RESEND", "MAX_RESEND",
    "AheadError", "AnswerError", "BrokerError", "EtcdError", "FailedError", "FencegateError", "KeyFileError", "LeaseLost",
    "OutputError", "RejectedError", "StaleError", "Timeout", "UnknownActuator", "InvalidCommand", "InvalidTopic", "parse_duty",
    "Heartbeat", "Etcd", "Lease", "acquire", "check_fence", "lock_name", "Seq", "Signer", "read_private_key",
    "ActuatorState", "Answer", "Command", "Fence", "Topics",
]

__version__ = "0.1.0"
