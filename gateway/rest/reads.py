"""The read methods the REST routes fetch through `Call.fetch` (coalesced into ReadBatch calls,
gateway/batching.py): each one's full gRPC path and response type, made once at import."""

from __future__ import annotations

from chain.v1 import rpc_pb2
from gateway.batching import Read

CHAIN = "/chain.v1.ChainService/"
KEYCHAIN = "/chain.v1.KeychainService/"

GET_ACCOUNT = Read(CHAIN + "GetAccount", rpc_pb2.GetAccountResponse)
LIST_CUSTODY_KEYS = Read(KEYCHAIN + "ListCustodyKeys", rpc_pb2.ListCustodyKeysResponse)
GET_CUSTODY_KEY = Read(KEYCHAIN + "GetCustodyKey", rpc_pb2.GetCustodyKeyResponse)
LIST_MERGE_REQUESTS_BY_REQUESTER = Read(
    CHAIN + "ListMergeRequestsByRequester", rpc_pb2.ListMergeRequestsByRequesterResponse
)
GET_ACCOUNT_ACTIVITY = Read(CHAIN + "GetAccountActivity", rpc_pb2.GetAccountActivityResponse)
LIST_KEYS = Read(CHAIN + "ListKeys", rpc_pb2.ListKeysResponse)
GET_KEY = Read(CHAIN + "GetKey", rpc_pb2.GetKeyResponse)
LIST_VERIFICATIONS = Read(CHAIN + "ListVerifications", rpc_pb2.ListVerificationsResponse)
LIST_LINKS = Read(CHAIN + "ListLinks", rpc_pb2.ListLinksResponse)
LIST_REACTIONS = Read(CHAIN + "ListReactions", rpc_pb2.ListReactionsResponse)
GET_PROJECT_BY_NAME = Read(CHAIN + "GetProjectByName", rpc_pb2.GetProjectByNameResponse)
GET_STORAGE_QUOTA_PROOF = Read(CHAIN + "GetStorageQuotaProof", rpc_pb2.GetStorageQuotaProofResponse)
