package core

// Todo is one item of the list the model keeps for a session (todowrite),
// in opencode's shape (which has no id: the list is replaced whole).
type Todo struct {
	Content string `json:"content"`
	// Status is pending, in_progress, completed or cancelled.
	Status string `json:"status"`
	// Priority is high, medium or low.
	Priority string `json:"priority"`
}

// Todo statuses and priorities.
const (
	TodoPending    = "pending"
	TodoInProgress = "in_progress"
	TodoCompleted  = "completed"
	TodoCancelled  = "cancelled"
)

// EventTodoUpdated carries a session's whole todo list after a change.
const EventTodoUpdated = "todo.updated"
