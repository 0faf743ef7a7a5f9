package background

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// uidListMaxAge is how long a list of a kind's objects answers UID
// lookups: a resync or a policy change looks up the triggers of every
// downstream object (their labels carry the trigger's UID, not its name)
// in a burst, and one list serves the burst instead of one list each.
const uidListMaxAge = 10 * time.Second

// triggerNames finds a trigger's name by its UID.
type triggerNames struct {
	mu    sync.Mutex
	lists map[triggerScope]*uidList
}

type triggerScope struct {
	gvr       schema.GroupVersionResource
	namespace string
}

type uidList struct {
	at    time.Time
	names map[types.UID]string
}

// nameOf returns the name of the object with the UID, "" when there is
// none. A recent list answers; a UID it lacks is looked up in a new list,
// since the object may be newer than the list.
func (c *Controller) nameOf(ctx context.Context, gvr schema.GroupVersionResource, namespace string, uid types.UID) (string, error) {
	n := &c.triggerNames
	scope := triggerScope{gvr, namespace}
	n.mu.Lock()
	l := n.lists[scope]
	n.mu.Unlock()
	if l != nil && time.Since(l.at) < uidListMaxAge {
		if name, ok := l.names[uid]; ok {
			return name, nil
		}
	}
	at := time.Now()
	objs, err := c.listMetadata(ctx, gvr, namespace)
	if err != nil {
		return "", err
	}
	l = &uidList{at: at, names: make(map[types.UID]string, len(objs))}
	for i := range objs {
		l.names[objs[i].UID] = objs[i].Name
	}
	n.mu.Lock()
	if n.lists == nil {
		n.lists = map[triggerScope]*uidList{}
	}
	for s, old := range n.lists {
		if time.Since(old.at) >= uidListMaxAge {
			delete(n.lists, s)
		}
	}
	n.lists[scope] = l
	n.mu.Unlock()
	return l.names[uid], nil
}
