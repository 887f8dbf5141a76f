'use strict';

// Network errors as one line a person can act on, never a stack trace:
// "connection refused: nothing listens at 127.0.0.1:2379 (is etcd running?
// is the URL right?)".

// code finds the system error code of err or of its causes (fetch wraps
// them: TypeError "fetch failed", cause Error ECONNREFUSED, or an
// AggregateError of one per address).
function code(err) {
  for (let e = err, depth = 0; e && depth < 5; e = e.cause, depth++) {
    if (e.code && typeof e.code === 'string') return e.code;
    if (Array.isArray(e.errors)) {
      for (const x of e.errors) if (x && typeof x.code === 'string') return x.code;
    }
    if (e.name === 'TimeoutError') return 'TIMEOUT';
  }
  return '';
}

// hostPort returns host:port of a URL, for messages.
function hostPort(url) {
  try {
    const u = new URL(url);
    const port = u.port || { 'http:': '80', 'https:': '443', 'mqtt:': '1883', 'tcp:': '1883', 'mqtts:': '8883', 'ssl:': '8883' }[u.protocol] || '';
    return port ? `${u.hostname}:${port}` : u.hostname;
  } catch (e) {
    return String(url);
  }
}

// network explains err, from a connection to url, a service called what
// ("etcd", "the MQTT broker").
function network(url, err, what) {
  const at = hostPort(url);
  const hint = `(is ${what} running? is the URL right?)`;
  switch (code(err)) {
    case 'ECONNREFUSED':
      return `connection refused: nothing listens at ${at} ${hint}`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `no such host: ${at.replace(/:\d+$/, '')} (is the URL right?)`;
    case 'ETIMEDOUT':
    case 'TIMEOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return `no answer from ${at} in time ${hint}`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `${at} cannot be reached from here (network down, or a wrong address?)`;
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
      return `the connection to ${at} was closed by the other side (is it ${what}, and does it speak this protocol?)`;
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
      return `the certificate of ${at} is not signed by a CA this node trusts: give the CA file of the broker's certificate`;
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return `the certificate of ${at} is not for that host name: use the name the certificate names in the URL`;
    case 'CERT_HAS_EXPIRED':
      return `the certificate of ${at} has expired`;
    default: {
      const msgs = [];
      for (let e = err, depth = 0; e && depth < 5; e = e.cause, depth++) msgs.push(e.message || String(e));
      return `${at}: ${msgs.join(': ')}`;
    }
  }
}

module.exports = { network, code, hostPort };
