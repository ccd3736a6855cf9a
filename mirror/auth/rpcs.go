package auth

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/admin/scram"
)

// Operations Authorize is asked about, on the CLUSTER resource (Kafka's).
const (
	OpDescribe = "DESCRIBE"
	OpAlter    = "ALTER"
)

// Authorize reports whether the principal of the request served under ctx
// (admin.RequestContextFrom) may perform op (OpDescribe, OpAlter) on the
// cluster. nil allows everything.
type Authorize func(ctx context.Context, op string) bool

// APIs returns the admin.ExtraAPI keys that manage the store:
// DescribeUserScramCredentials v0 and AlterUserScramCredentials v0.
func (s *Store) APIs(authorize Authorize) []admin.ExtraAPI {
	allowed := func(ctx context.Context, op string) bool { return authorize == nil || authorize(ctx, op) }
	return []admin.ExtraAPI{
		{Key: int16(kmsg.DescribeUserSCRAMCredentials), MinVersion: 0, MaxVersion: 0,
			Serve: func(ctx context.Context, _ *admin.RequestContext, req kmsg.Request) (kmsg.Response, error) {
				r := req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
				if !allowed(ctx, OpDescribe) {
					resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
					resp.ErrorCode = int16(admin.CodeClusterAuthorizationFailed)
					resp.ErrorMessage = kmsg.StringPtr("not authorized: DESCRIBE on CLUSTER")
					return resp, nil
				}
				return s.describe(r), nil
			}},
		{Key: int16(kmsg.AlterUserSCRAMCredentials), MinVersion: 0, MaxVersion: 0,
			Serve: func(ctx context.Context, _ *admin.RequestContext, req kmsg.Request) (kmsg.Response, error) {
				return s.alter(req.(*kmsg.AlterUserSCRAMCredentialsRequest), allowed(ctx, OpAlter)), nil
			}},
	}
}

// describe answers DescribeUserScramCredentials: every user for a null or
// empty list, else each named user once (DUPLICATE_RESOURCE for a name given twice,
// RESOURCE_NOT_FOUND for a user without credentials).
func (s *Store) describe(req *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	names := s.Users()
	if len(req.Users) > 0 { // null or empty: every user, as Kafka
		names = names[:0]
		seen := map[string]int{}
		for _, u := range req.Users {
			seen[u.Name]++
		}
		for _, u := range req.Users {
			switch n := seen[u.Name]; {
			case n > 1:
				seen[u.Name] = -1
				resp.Results = append(resp.Results, result(u.Name, admin.CodeDuplicateResource, "Cannot describe SCRAM credentials for the same user twice in a single request: "+u.Name))
			case n == 1:
				names = append(names, u.Name)
			}
		}
	}
	for _, name := range names {
		creds := s.Mechanisms(name)
		if len(creds) == 0 {
			resp.Results = append(resp.Results, result(name, admin.CodeResourceNotFound, "Attempt to describe a user credential that does not exist: "+name))
			continue
		}
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		for _, c := range creds {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = c.Mechanism.Type, int32(c.Iterations)
			r.CredentialInfos = append(r.CredentialInfos, info)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func result(user string, code admin.Code, msg string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	r.User, r.ErrorCode, r.ErrorMessage = user, int16(code), &msg
	return r
}

// userOutcome is the result of one user of an alter request.
type userOutcome struct {
	code    admin.Code
	msg     string
	changes []Change
}

// alter answers AlterUserScramCredentials with one result per user, in the
// order users first appear. A user's changes are taken together: any problem
// (an unknown mechanism, iterations or salt out of bounds, a user and
// mechanism named twice, deleting a credential that does not exist) answers
// its code for that user and changes nothing of it. The accepted changes are
// persisted together before the answer; a store failure answers
// UNKNOWN_SERVER_ERROR for each of those users and changes nothing.
func (s *Store) alter(req *kmsg.AlterUserSCRAMCredentialsRequest, authorized bool) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	outcomes := map[string]*userOutcome{}
	of := func(user string) *userOutcome {
		o, ok := outcomes[user]
		if !ok {
			o = &userOutcome{}
			outcomes[user] = o
			order = append(order, user)
		}
		return o
	}
	fail := func(o *userOutcome, code admin.Code, msg string) {
		if o.code == admin.CodeNone {
			o.code, o.msg = code, msg
		}
	}
	pairs := map[[2]string]bool{}
	pair := func(o *userOutcome, user string, mech int8) (scram.Mechanism, bool) {
		m, ok := scram.ByType(mech)
		if !ok {
			fail(o, admin.CodeUnsupportedSaslMechanism, fmt.Sprintf("Unknown SCRAM mechanism %d", mech))
			return m, false
		}
		k := [2]string{user, m.Name}
		if pairs[k] {
			fail(o, admin.CodeDuplicateResource, "A user credential cannot be altered twice in the same request")
			return m, false
		}
		pairs[k] = true
		if user == "" || len(user) > scram.MaxUsername {
			fail(o, admin.CodeUnacceptableCredential, fmt.Sprintf("Username must have 1 to %d bytes", scram.MaxUsername))
			return m, false
		}
		return m, true
	}
	for _, d := range req.Deletions {
		o := of(d.Name)
		m, ok := pair(o, d.Name, d.Mechanism)
		if !ok {
			continue
		}
		if _, found, _ := s.ScramCredential(m, d.Name); !found {
			fail(o, admin.CodeResourceNotFound, fmt.Sprintf("Attempt to delete a user credential that does not exist: %s %s", d.Name, m.Name))
			continue
		}
		o.changes = append(o.changes, Change{User: d.Name, Mechanism: m})
	}
	for _, u := range req.Upsertions {
		o := of(u.Name)
		m, ok := pair(o, u.Name, u.Mechanism)
		if !ok {
			continue
		}
		c, err := m.FromSaltedPassword(u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil {
			fail(o, admin.CodeUnacceptableCredential, err.Error())
			continue
		}
		o.changes = append(o.changes, Change{User: u.Name, Mechanism: m, Credential: &c})
	}
	if !authorized {
		for _, o := range outcomes {
			o.code, o.msg = admin.CodeClusterAuthorizationFailed, "not authorized: ALTER on CLUSTER"
		}
	}
	var all []Change
	for _, user := range order {
		if o := outcomes[user]; o.code == admin.CodeNone {
			all = append(all, o.changes...)
		}
	}
	if len(all) > 0 {
		if err := s.Apply(all); err != nil {
			for _, o := range outcomes {
				if o.code == admin.CodeNone {
					o.code, o.msg = admin.CodeUnknownServerError, "the credentials could not be stored"
				}
			}
		}
	}
	for _, user := range order {
		o := outcomes[user]
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, int16(o.code)
		if o.msg != "" {
			r.ErrorMessage = kmsg.StringPtr(o.msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}
