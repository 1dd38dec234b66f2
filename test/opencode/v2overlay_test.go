package opencode_test

import (
	"encoding/json"
	"fmt"
)

// overlayV2 adds to opencode 1.18.33's document what opencode 2's later
// schema (its repository's packages/schema) has and agentd serves where
// the two differ, so that the judge holds agentd to the later shapes
// there and to 1.18.33's everywhere else. Each addition is one of the
// differences docs/ARCHITECTURE.md lists ("opencode 2's API"):
//
//  1. SessionV2Info has outcome and time.idle: how the last run ended,
//     and when (Session.Info's idle_outcome and time_idle).
//  2. The transcript has an idle entry per ended run
//     (Session.Message.Idle: {id, type "idle", outcome, time}).
//  3. session.execution.started / succeeded / failed / interrupted are
//     durable session events (SessionEvent.Execution); interrupted's
//     reason is user, shutdown, superseded or inactivity.
//  4. interrupt answers 200 {interrupted: boolean} (1.18.33: 204).
func overlayV2(raw []byte) ([]byte, error) {
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	schemas, ok := dig(d, "components", "schemas").(map[string]any)
	if !ok {
		return nil, fmt.Errorf("document has no components.schemas")
	}
	outcome := obj{"type": "string", "enum": []any{"succeeded", "failed", "interrupted"}}
	info, _ := schemas["SessionV2Info"].(map[string]any)
	props, _ := dig(info, "properties").(map[string]any)
	timeProps, _ := dig(info, "properties", "time", "properties").(map[string]any)
	if props == nil || timeProps == nil {
		return nil, fmt.Errorf("document has no SessionV2Info with time")
	}
	props["outcome"] = outcome
	timeProps["idle"] = obj{"type": "number"}

	schemas["SessionMessageIdle"] = closed(obj{
		"id": obj{"type": "string", "pattern": "^msg_"}, "metadata": obj{"type": "object"},
		"time": closed(obj{"created": obj{"type": "number"}}, "created"),
		"type": obj{"type": "string", "enum": []any{"idle"}}, "outcome": outcome,
	}, "id", "time", "type", "outcome")
	if err := addToUnion(schemas, "SessionMessage", "anyOf", "SessionMessageIdle"); err != nil {
		return nil, err
	}

	durable := dig(schemas, "SessionNextPrompted", "properties", "durable")
	if durable == nil {
		return nil, fmt.Errorf("document has no SessionNextPrompted.durable")
	}
	sid := obj{"type": "string", "pattern": "^ses"}
	execution := map[string]obj{
		"SessionExecutionStarted":   closed(obj{"sessionID": sid}, "sessionID"),
		"SessionExecutionSucceeded": closed(obj{"sessionID": sid}, "sessionID"),
		"SessionExecutionFailed": closed(obj{"sessionID": sid, "error": closed(obj{
			"type": obj{"type": "string"}, "message": obj{"type": "string"}, "status": obj{"type": "number"}}, "type", "message")},
			"sessionID", "error"),
		"SessionExecutionInterrupted": closed(obj{"sessionID": sid,
			"reason": obj{"type": "string", "enum": []any{"user", "shutdown", "superseded", "inactivity"}}}, "sessionID", "reason"),
	}
	types := map[string]string{"SessionExecutionStarted": "session.execution.started", "SessionExecutionSucceeded": "session.execution.succeeded",
		"SessionExecutionFailed": "session.execution.failed", "SessionExecutionInterrupted": "session.execution.interrupted"}
	for name, data := range execution {
		schemas[name] = closed(obj{
			"id": obj{"type": "string", "pattern": "^evt_"}, "metadata": obj{"type": "object"},
			"type": obj{"type": "string", "enum": []any{types[name]}}, "durable": durable,
			"location": obj{"$ref": "#/components/schemas/LocationRef"}, "data": data,
		}, "id", "type", "data")
		if err := addToUnion(schemas, "V2Event", "anyOf", name); err != nil {
			return nil, err
		}
		if err := addToUnion(schemas, "SessionDurableEvent", "oneOf", name); err != nil {
			return nil, err
		}
	}

	interrupt, ok := dig(d, "paths", "/api/session/{sessionID}/interrupt", "post", "responses").(map[string]any)
	if !ok {
		return nil, fmt.Errorf("document has no interrupt route")
	}
	interrupt["200"] = obj{"description": "Whether a run was interrupted", "content": obj{"application/json": obj{
		"schema": closed(obj{"interrupted": obj{"type": "boolean"}}, "interrupted")}}}
	return json.Marshal(d)
}

type obj = map[string]any

// closed is an object schema with these properties, these required, and
// no others.
func closed(props obj, required ...string) obj {
	req := make([]any, len(required))
	for i, r := range required {
		req[i] = r
	}
	return obj{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func addToUnion(schemas map[string]any, union, kind, member string) error {
	u, ok := schemas[union].(map[string]any)
	if !ok {
		return fmt.Errorf("document has no %s", union)
	}
	list, ok := u[kind].([]any)
	if !ok {
		return fmt.Errorf("%s has no %s", union, kind)
	}
	u[kind] = append(list, obj{"$ref": "#/components/schemas/" + member})
	return nil
}
