package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/lease"
)

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
