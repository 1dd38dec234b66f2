package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"
)

// A node's presence is its listening connection: the connection carries
// the node's name as its application_name, and the server drops it the
// moment the node's process dies (kill -9 closes its sockets). A lease
// whose owner has no such connection belongs to a node that is gone, so
// another node takes the run at its next sweep instead of waiting out the
// lease's TTL. A node that is alive but cannot reach the database (a
// partition) also looks gone; the epoch fence keeps its late writes out,
// as it does for an expired lease. A frozen process keeps its sockets and
// is still waited for until the lease expires.

// appPrefix is the start of the application_name of every node's
// listening connection in schema: the schema's hash keeps clusters that
// share a database, each in its own schema, from seeing each other's nodes.
func appPrefix(schema string) string {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return fmt.Sprintf("agentd:%08x:", h.Sum32())
}

// appName is the application_name of a node's listening connection;
// PostgreSQL keeps 63 bytes of it, and the conditions below compare the
// same 63.
func appName(prefix, node string) string {
	name := prefix + node
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// ownerGone is the SQL condition under which a run's lease belongs to a
// node that is no longer connected. A node judges others only once its own
// connection has been visible for the grace period, so that the check
// works where it runs (a pooler that hides application names makes every
// owner look present, never gone) and nodes reconnecting after a database
// restart are not taken for dead. A negative grace turns the check off.
func ownerGone(prefix, me string, grace time.Duration) string {
	if grace < 0 {
		return "false"
	}
	return fmt.Sprintf(`(lease_expires_ms > 0 AND %s)`, ownerAbsent(prefix, me,
		fmt.Sprintf(` AND a.backend_start <= now() - interval '%d milliseconds'`, grace.Milliseconds())))
}

// ownerAbsent is the SQL condition under which a run's lease owner has no
// listening connection while this node's own (app, matching ownSince, an
// extra condition on it in pg_stat_activity a) has one.
func ownerAbsent(prefix, app, ownSince string) string {
	// Both subqueries are uncorrelated: PostgreSQL reads pg_stat_activity
	// once per statement (a hashed subplan), not once per leased run.
	return fmt.Sprintf(`(left(%[1]s || lease_owner, 63) NOT IN (
			SELECT a.application_name FROM pg_stat_activity a WHERE a.datname = current_database()
				AND a.application_name IS NOT NULL)
		AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = current_database()
			AND a.application_name = %[2]s%[3]s))`, quote(prefix), quote(app), ownSince)
}

// ownerStopped is the SQL condition, on a run's lease before a claim,
// under which its owner stopped rather than merely let the lease lapse:
// it released the lease in a shutdown, or it is no longer connected
// (while this node's own connection is visible: a pooler that hides
// application names must not make every owner look stopped), or it is an
// earlier process of this node (same name), whose lease was last renewed
// before this process opened the store. A live node whose lease lapsed
// (a pause, a slow network) did not stop: the run it was executing is
// not a restart's. ttlParam is the placeholder of the claim's TTL: a
// lease this process took expires at least that long after opened, as a
// node claims and renews with one TTL (the engine's LeaseTTL); one the
// earlier process took or renewed last expires sooner.
func ownerStopped(prefix, me string, openedMS int64, grace time.Duration, ttlParam string) string {
	absent := "false"
	if grace >= 0 {
		absent = ownerAbsent(prefix, appName(prefix, me), "")
	}
	return fmt.Sprintf(`(lease_epoch > 0 AND lease_owner <> '' AND (lease_expires_ms = 0
		OR (lease_owner <> %[1]s AND %[2]s)
		OR (lease_owner = %[1]s AND lease_expires_ms < %[3]d + %[4]s)))`, quote(me), absent, openedMS, ttlParam)
}

// quote makes s a SQL string literal.
func quote(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// Node is one agentd node connected to the database, as GET /node lists
// the cluster.
type Node struct {
	// ID is the node's id (its leases' owner), cut to what PostgreSQL keeps.
	ID string `json:"id"`
	// Since is when its listening connection was made.
	Since time.Time `json:"since"`
	// Leases is how many runs it holds an unexpired lease on.
	Leases int `json:"leases"`
}

// Nodes lists the nodes connected to this database and schema, with the
// leases each holds.
func (s *Store) Nodes(ctx context.Context) ([]Node, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT substr(a.application_name, length($1) + 1), min(a.backend_start),
			(SELECT count(*) FROM runs r WHERE r.state IN ('queued', 'running', 'retrying')
				AND left($1 || r.lease_owner, 63) = a.application_name AND r.lease_expires_ms > `+nowMS+`)
		FROM pg_stat_activity a
		WHERE a.datname = current_database() AND starts_with(a.application_name, $1)
		GROUP BY a.application_name ORDER BY 2`, s.appPrefix)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", storageError(err))
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var n Node
		if err := rows.Scan(&n.ID, &n.Since, &n.Leases); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
