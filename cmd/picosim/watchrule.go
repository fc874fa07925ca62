package main

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// ruleWatchPrevious: a watch's task_update event carries, as Previous, the
// task as that watch last showed it (in its capture or its last event of
// the task), and as Task the same task updated. The view folds Task alone,
// so only a listener reading Previous could tell it wrong.
const ruleWatchPrevious oracleRule = "task-update-carries-the-previous-task"

// taskTrail is what one watch has shown of its live tasks: each task's
// JSON as its capture or its last event left it.
type taskTrail struct {
	e     *env
	what  string
	tasks map[storage.ID][]byte
	// from is the sequence the watch's view was read at (its capture or
	// its last resnapshot): it can have queued no more commits than the
	// session made since.
	from storage.ID
}

// ruleWatchLag: a watch lags only when more commits are queued for it than
// the session's bound (Options.WatchQueueMax; 0 means 1,024), so only
// after the session made more commits than that since its view was read.
const ruleWatchLag oracleRule = "a-watch-lags-only-past-its-bound"

// watchQueueDefault is the bound of a session whose WatchQueueMax is 0.
const watchQueueDefault = 1024

// trail starts following the watch w of conversation conv from its view
// as it stands (its capture, before Start delivers anything).
func (e *env) trail(w *core.WatchHandle, what string) *taskTrail {
	t := &taskTrail{e: e, what: what}
	t.reset(w.View())
	return t
}

// reset starts again from a view: a new capture (Resnapshot) holds every
// event the dropped queue held.
func (t *taskTrail) reset(v *core.ConversationView) {
	t.tasks = map[storage.ID][]byte{}
	if v == nil {
		return
	}
	t.from = v.ReadAt
	for _, task := range v.Tasks {
		t.tasks[task.ID] = taskJSON(task)
	}
}

// event holds one delivered event to the rule and follows it.
func (t *taskTrail) event(ev core.ConversationEvent) {
	if ev.Task == nil {
		return
	}
	id := ev.Task.ID
	switch ev.Type {
	case core.EventTaskStart:
		t.tasks[id] = taskJSON(ev.Task)
	case core.EventTaskUpdate:
		shown, known := t.tasks[id]
		switch {
		case ev.Previous == nil:
			t.fail("task_update of task %d at %d carries no previous task", id, ev.ReadAt)
		case ev.Previous.ID != id:
			t.fail("task_update of task %d at %d carries task %d as its previous", id, ev.ReadAt, ev.Previous.ID)
		case known && !bytes.Equal(shown, taskJSON(ev.Previous)):
			t.fail("task_update of task %d at %d carries previous %s; the watch last showed %s", id, ev.ReadAt, taskJSON(ev.Previous), shown)
		}
		t.tasks[id] = taskJSON(ev.Task)
	case core.EventTaskEnd:
		delete(t.tasks, id)
	}
}

// listen is what every watch of a run does with an event delivered to
// it: holds it to the trail, and when the watch lagged behind, resnapshots
// (what a client does when it falls behind) and follows the new capture.
func (t *taskTrail) listen(ctx context.Context, w *core.WatchHandle, ev core.ConversationEvent) {
	t.event(ev)
	if lagged(ev) && t.e.h != nil {
		if err := lagChecked(t.what, t.from, t.e.h.Store().LastSeq(), t.e.watchQueue()); err != nil {
			_ = t.e.oracle.fail(err)
		}
		v, _ := w.Resnapshot(ctx)
		t.reset(v)
	}
}

// lagChecked holds a lag of the watch named what, whose view was read at
// from, with the session at last and its WatchQueueMax queue, to the rule.
func lagChecked(what string, from, last storage.ID, queue int) error {
	bound := storage.ID(watchQueueDefault)
	if queue > 0 {
		bound = storage.ID(queue)
	}
	if made := last - from; made <= bound {
		return broke(ruleWatchLag, "%s lagged after %d commits since its view was read at %d; its bound is %d", what, made, from, bound)
	}
	return nil
}

func (t *taskTrail) fail(format string, args ...any) {
	t.e.oracle.fail(broke(ruleWatchPrevious, t.what+": "+format, args...))
}

// taskJSON is a task as a watch's listener could compare it.
func taskJSON(task *storage.Task) []byte {
	raw, err := json.Marshal(task)
	if err != nil {
		return []byte(err.Error())
	}
	return raw
}
