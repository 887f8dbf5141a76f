'use strict';

// fencegate-gateway: the configuration of one gateway, shared by the fenced
// outputs that command it: its broker (one MQTT connection for them all),
// its id and topic prefix, the etcd that grants the leases, and the
// controller's signing key. The broker password and the signing key are
// credentials: Node-RED keeps them out of the flow file.

const { GatewayConnection } = require('../lib/connection');
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
        broker: n.broker, prefix: node.prefix, gateway: node.gatewayId,
        username: (n.username || '').trim(), password: creds.password,
        ca: (n.ca || '').trim(), cert: (n.cert || '').trim(), key: (n.key || '').trim(),
        signer: (n.signer || '').trim(), signingKey,
      });
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

  RED.nodes.registerType('fencegate-gateway', FencegateGatewayNode, {
    credentials: {
      password: { type: 'password' },
      signingKey: { type: 'password' },
    },
  });
};
