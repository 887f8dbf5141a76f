'use strict';

// fencegate-gateway: the configuration of one gateway, shared by the fenced
// outputs that command it: its broker (one MQTT connection for them all),
// set here or taken from one of Node-RED's own mqtt-broker configuration
// nodes, its id and topic prefix, the etcd that grants the leases, and the
// controller's signing key. The broker password and the signing key are
// credentials: Node-RED keeps them out of the flow file.

const { GatewayConnection, fromMqttBroker } = require('../lib/connection');
const { Etcd } = require('../lib/etcd');
const sign = require('../lib/sign');

module.exports = function (RED) {
  function FencegateGatewayNode(n) {
    RED.nodes.createNode(this, n);
    const node = this;
    node.gatewayId = (n.gatewayId || '').trim();
    node.prefix = (n.prefix || '').trim() || 'fencegate';
    node.ttl = Number(n.ttl) > 0 ? Math.round(Number(n.ttl)) : 10;
    node.users = new Set();
    const creds = node.credentials || {};
    try {
      const signingKey = creds.signingKey && creds.signingKey.trim() ? sign.privateKey(creds.signingKey) : undefined;
      node.etcd = new Etcd(n.etcd);
      node.connection = new GatewayConnection({
        ...broker(n, creds), prefix: node.prefix, gateway: node.gatewayId,
        signer: (n.signer || '').trim(), signingKey,
      });
      const v = node.connection;
      if (v.via && v.url.startsWith('mqtts:') && v.options.rejectUnauthorized === false) {
        node.warn(`TLS to the broker ${v.url} without verifying its certificate: the TLS configuration of ${v.via} has "Verify server certificate" off (or it has none)`);
      }
    } catch (e) {
      // Said by every fenced output that uses this configuration, too.
      node.configError = `gateway configuration: ${e.message}`;
      node.error(node.configError);
    }

    // The broker's troubles are logged once each; the fenced outputs show
    // them in their status while they last.
    let lastProblem = '';
    if (node.connection) {
      node.connection.on('problem', (text) => {
        if (text !== lastProblem) node.warn(text);
        lastProblem = text;
      });
      node.connection.on('ready', () => {
        lastProblem = '';
      });
    }

    // register is called by each fenced output that uses this
    // configuration; the connection starts with the first.
    node.register = (user) => {
      node.users.add(user);
      if (node.connection) node.connection.start();
    };
    node.deregister = (user) => node.users.delete(user);

    node.on('close', (done) => {
      const c = node.connection;
      node.connection = undefined;
      (c ? c.close() : Promise.resolve()).then(() => done(), () => done());
    });
  }

  // broker returns the broker settings of configuration n: those of the
  // mqtt-broker node it names, if it names one, else its own.
  function broker(n, creds) {
    if (!n.mqttBroker) {
      return {
        broker: n.broker, username: (n.username || '').trim(), password: creds.password,
        ca: (n.ca || '').trim(), cert: (n.cert || '').trim(), key: (n.key || '').trim(),
      };
    }
    const b = RED.nodes.getNode(n.mqttBroker);
    if (!b || b.type !== 'mqtt-broker') {
      throw new Error(`its MQTT broker node ${n.mqttBroker} is ${b ? `a ${b.type} node, not an mqtt-broker` : 'not deployed (deleted, or disabled?)'}: choose another, or none and set the broker here`);
    }
    return fromMqttBroker(b, b.name || b.brokerurl);
  }

  RED.nodes.registerType('fencegate-gateway', FencegateGatewayNode, {
    credentials: {
      password: { type: 'password' },
      signingKey: { type: 'password' },
    },
  });
};
