package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencegate/fencegate/lease"
)

// etcdEndpoints reads --etcd: comma-separated client URLs of one etcd
// cluster, each http:// or https:// with a host and a port.
func etcdEndpoints(urls string) ([]string, error) {
	var eps []string
	for _, s := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("--etcd %q: want etcd's client URL, http://HOST:PORT (or https://), e.g. http://127.0.0.1:2379; several, comma-separated", s)
		}
		eps = append(eps, u.Scheme+"://"+u.Host)
	}
	return eps, nil
}

// dialEtcd makes a client of the etcd at eps, once one of them takes a
// TCP connection within wait: an etcd that is not there is said at once
// (the etcd client itself waits, silent, for as long as it is given). The
// client logs nothing: its warnings are JSON lines for etcd's operators,
// and what goes wrong comes back as errors.
func dialEtcd(eps []string, wait time.Duration) (*clientv3.Client, error) {
	var first error
	for _, ep := range eps {
		u, _ := url.Parse(ep)
		c, err := net.DialTimeout("tcp", u.Host, min(wait, 5*time.Second))
		if err == nil {
			c.Close()
			first = nil
			break
		}
		if first == nil {
			first = fmt.Errorf("etcd %s: %w", ep, explainDial(err, u.Host))
		}
	}
	if first != nil {
		return nil, first
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(eps, ","), err)
	}
	return cli, nil
}

func explainDial(err error, hostport string) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("connection refused: nothing listens at %s (is etcd running? is the URL right?)", hostport)
	}
	return err
}

// etcdRevision reads the current revision of the etcd cluster at urls
// (comma-separated endpoints), giving up after ten seconds.
func etcdRevision(ctx context.Context, urls string) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(urls, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("etcd %s: %w", urls, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rev, err := lease.Revision(ctx, cli)
	if err != nil {
		return 0, fmt.Errorf("etcd %s: %w (is it running, and is this the etcd the controllers get their tokens from? Nothing was created)", urls, err)
	}
	return rev, nil
}
