// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the version
// pinned in ../go.mod. It does what etcd's own main does: hand the arguments to etcdmain.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
