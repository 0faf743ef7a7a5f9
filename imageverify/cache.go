package imageverify

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/charter-dev/charter/engine/loader"
)

// Cache holds verified results, keyed by the image digest and a hash of
// the whole check (scope policy/rule, attestor, repository, predicate
// type): a policy edit, another rule or a tag moved to another digest
// never hits an old entry. Only successes are stored. It also holds the
// image data policies read (Verifier.ImageData), keyed by digest, under
// the same bounds. Entries expire
// after the TTL and the least recently used go first beyond the size
// bound. Safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	now     func() time.Time
	order   *list.List // front: most recently used
	entries map[string]*list.Element
}

type cacheEntry struct {
	key      string
	val      any // loader.ImageVerified or imageData
	verified time.Time
	expires  time.Time
}

// NewCache returns a cache of at most size results, each kept for ttl.
// now, when nil, is time.Now.
func NewCache(size int, ttl time.Duration, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{ttl: ttl, max: size, now: now, order: list.New(), entries: map[string]*list.Element{}}
}

// Get returns the result stored under key, if it has not expired and was
// verified at or after since (any time when since is zero).
func (c *Cache) Get(key string, since time.Time) (loader.ImageVerified, bool) {
	v, ok := c.get(key, since)
	res, isResult := v.(loader.ImageVerified)
	return res, ok && isResult
}

// Put stores a result.
func (c *Cache) Put(key string, res loader.ImageVerified) { c.put(key, res) }

func (c *Cache) get(key string, since time.Time) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if !c.now().Before(e.expires) {
		c.order.Remove(el)
		delete(c.entries, key)
		return nil, false
	}
	if e.verified.Before(since) {
		return nil, false
	}
	c.order.MoveToFront(el)
	return e.val, true
}

func (c *Cache) put(key string, val any) {
	if c.max <= 0 || c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*cacheEntry)
		e.val, e.verified, e.expires = val, now, now.Add(c.ttl)
		c.order.MoveToFront(el)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, val: val, verified: now, expires: now.Add(c.ttl)})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}

// Len returns the number of entries held.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// cacheKey is "<repository>@<digest>;<kind>;<sha256 of the check>",
// where repository is the image's reference without tag or digest. The
// credentials are left out: they decide how the registry is reached, not
// what is accepted.
func cacheKey(repository, digest string, kind checkKind, check loader.ImageCheck) (string, error) {
	c := check
	c.Image, c.Credentials, c.UseCache, c.VerifiedSince = "", loader.ImageCredentials{}, false, time.Time{}
	data, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return repository + "@" + digest + ";" + string(kind) + ";" + hex.EncodeToString(sum[:]), nil
}
