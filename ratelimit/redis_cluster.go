package ratelimit

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/redis/rueidis"
)

// Redis Cluster: key names with a hash tag, and decisions whose zones land
// in several slots.

// decideSlots decides on a Redis Cluster, where one script may only touch
// keys of one slot. Zones whose request keys are equal share a hash tag,
// hence a slot, and are decided together as on a single node. Zones keyed
// differently (say per address and per user) land in different slots: each
// slot's zones are decided atomically, all slots in one round trip; if any
// says no or fails, the slots that consumed are refunded in a second one,
// so a rejected request, or one on_error decides, consumes nothing, as on a
// single node. Between the two, a concurrent request of the same caller
// may see the consumption about to be refunded and be rejected: the limit
// errs on the strict side, never lets more through than the rate.
func (b *redisPlan) decideSlots(ctx context.Context, client rueidis.Client, names []string, tags []tag, out []outcome, holds []hold) (bool, error) {
	var groups [maxZones][]int // zone indexes of each tag
	n := 0
	for i := range names {
		g := 0
		for g < n && tags[groups[g][0]] != tags[i] {
			g++
		}
		if g == n {
			n++
		}
		groups[g] = append(groups[g], i)
	}
	if n == 1 {
		return decideScript(ctx, client, names, b.args, out, holds, b.refundable)
	}
	execs := make([]rueidis.LuaExec, n)
	for g, zs := range groups[:n] {
		for _, i := range zs {
			execs[g].Keys = append(execs[g].Keys, names[i])
			execs[g].Args = append(execs[g].Args, b.args[3*i], b.args[3*i+1], b.args[3*i+2])
		}
	}
	// A refusal to send (runScripts' error) is a panic recovered in one
	// exec: the others may have run and consumed, so every result is read.
	results, failed := runScripts(ctx, client, gcraScript, execs)
	allowed := true
	var consumed [maxZones]bool
	var one [maxZones]outcome
	var oneHolds [maxZones]hold
	var refundable [maxZones]bool
	for g, zs := range groups[:n] {
		var ints scriptReply
		res, err := ints.read(results[g])
		if err != nil {
			failed = errors.Join(failed, err)
			allowed = false
			continue
		}
		for k, i := range zs {
			refundable[k] = b.refundable[i]
		}
		ok, err := scriptOutcomes(res, one[:len(zs)], oneHolds[:len(zs)], refundable[:len(zs)])
		if err != nil {
			failed = errors.Join(failed, err)
			allowed = false
			continue
		}
		consumed[g], allowed = ok, allowed && ok
		for k, i := range zs {
			out[i] = one[k]
			if b.refundable[i] {
				holds[i] = oneHolds[k]
			}
		}
	}
	if allowed && failed == nil {
		return true, nil
	}
	var refunds []rueidis.LuaExec
	for g, zs := range groups[:n] {
		if !consumed[g] {
			continue
		}
		var r rueidis.LuaExec
		for _, i := range zs {
			r.Keys = append(r.Keys, names[i])
			var h *hold
			if b.refundable[i] {
				h = &holds[i]
			}
			r.Args = b.appendRefundArgs(r.Args, i, h)
			out[i].after -= b.intervals[i] * 1000 // as if never consumed
		}
		refunds = append(refunds, r)
	}
	if err := runRefunds(ctx, client, refunds); err != nil {
		return false, errors.Join(failed, fmt.Errorf("refunding a rejected request's other slots: %w", err))
	}
	return false, failed
}

// runScripts runs script once per exec, concurrently: the client pipelines
// them, one round trip in all (EVALSHA; EVAL once where the node lacks the
// script). A refusal is that exec's error, as in runScript. (rueidis's
// ExecMulti would first load the script on every node, on every call.)
func runScripts(ctx context.Context, client rueidis.Client, script *rueidis.Lua, execs []rueidis.LuaExec) ([]rueidis.RedisResult, error) {
	res := make([]rueidis.RedisResult, len(execs))
	errs := make([]error, len(execs))
	var wg sync.WaitGroup
	for i, e := range execs {
		wg.Go(func() {
			// A panic here would end the process: no request's recover
			// reaches another goroutine.
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("redis client refused a script for keys %q: %v", e.Keys, r)
				}
			}()
			res[i] = script.Exec(ctx, client, e.Keys, e.Args)
		})
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

// tag is a key's Redis Cluster hash tag.
type tag [8]byte

// names are the Redis keys of one request, one per zone:
// <key_prefix>{<tag>}:<zone>:<key>, the tag being 8 hex digits of FNV-1a
// over <key>. Zones of one request with the same key share it, hence one
// Redis Cluster slot; callers spread over the cluster's nodes. tags gets
// each name's tag; names go into dst (len(keys) of them: the caller's
// array, so the slice costs no allocation).
func (b *redisPlan) names(keys []requestKey, tags []tag, dst []string) []string {
	names := dst[:len(keys)]
	var buf, kb [256]byte // one allocation per name: its string
	for i, k := range keys {
		key := k.appendRedisName(kb[:0])
		tags[i] = hashTag(key)
		name := append(append(append(buf[:0], b.prefix...), '{'), tags[i][:]...)
		name = append(append(name, b.zoneKeys[i]...), key...)
		names[i] = string(name)
	}
	return names
}

// hashTag is FNV-1a (32 bits) of key in hexadecimal: the same on every
// Caddy node, whatever its hash seed.
func hashTag(key []byte) tag {
	h := fnv.New32a()
	h.Write(key)
	var t tag
	hex.Encode(t[:], binary.BigEndian.AppendUint32(nil, h.Sum32()))
	return t
}
