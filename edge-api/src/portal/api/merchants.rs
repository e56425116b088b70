//! `/portal/api/merchants`: the institution's merchants, their settlement wallets and USDC
//! settlement network, return origins and publishable key, and their balances in the books:
//! each one's statement and debt limit.

use serde::{Deserialize, Deserializer};

use super::call::{reply, to_json, Call, Rotate};
use crate::error::ApiError;
use crate::portal::balances::{self, statement};
use crate::portal::merchants::{self, merchant_id, MerchantPatch, NewMerchantBody};
use crate::portal::usdc_settlement;
use crate::route::Answer;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WalletBody {
    address: String,
    /// The admin's word that a contract at the address is a wallet that can receive the assets.
    #[serde(default)]
    contract_wallet: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsdcSettlementBody {
    /// A network's name, or `null` to clear the choice; required (absent is not `null`).
    #[serde(default, deserialize_with = "present")]
    usdc_settlement_network: Option<Option<String>>,
}

/// A member that is present: `Some(None)` when it is `null`.
fn present<'de, D: Deserializer<'de>>(from: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(from).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DebtLimitBody {
    debt_limit: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OriginsBody {
    return_origins: Vec<String>,
}

/// `GET /portal/api/merchants`.
pub async fn list(c: Call<'_>) -> Answer {
    reply(200, to_json(&merchants::list(&c.portal, c.query()).await?)?)
}

/// `POST /portal/api/merchants`.
pub async fn create(mut c: Call<'_>) -> Answer {
    let new: NewMerchantBody = c.json().await?;
    reply(201, to_json(&merchants::create(&c.portal, &new).await?)?)
}

/// `GET /portal/api/merchants/{id}`.
pub async fn show(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    reply(200, to_json(&merchants::detail(&c.portal, id).await?)?)
}

/// `PATCH /portal/api/merchants/{id}`.
pub async fn update(mut c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let patch: MerchantPatch = c.json().await?;
    reply(
        200,
        to_json(&merchants::update(&c.portal, id, &patch).await?)?,
    )
}

/// `PUT /portal/api/merchants/{id}/wallets/{network}`.
pub async fn set_wallet(mut c: Call<'_>, id: &str, network: &str) -> Answer {
    let id = merchant_id(id)?;
    let WalletBody {
        address,
        contract_wallet,
    } = c.json().await?;
    let merchant =
        merchants::set_wallet(&c.portal, id, network, Some(&address), contract_wallet).await?;
    reply(200, to_json(&merchant)?)
}

/// `DELETE /portal/api/merchants/{id}/wallets/{network}`.
pub async fn remove_wallet(c: Call<'_>, id: &str, network: &str) -> Answer {
    let id = merchant_id(id)?;
    reply(
        200,
        to_json(&merchants::set_wallet(&c.portal, id, network, None, false).await?)?,
    )
}

/// `PUT /portal/api/merchants/{id}/usdc-settlement-network`: `{"usdc_settlement_network":
/// "base"}` chooses the network, `null` clears the choice.
pub async fn set_usdc_settlement(mut c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let UsdcSettlementBody {
        usdc_settlement_network,
    } = c.json().await?;
    let network = usdc_settlement_network.ok_or_else(|| {
        ApiError::invalid_request(format!(
            "{}: required: a network's name, or null to clear the choice",
            usdc_settlement::FIELD
        ))
    })?;
    reply(
        200,
        to_json(&usdc_settlement::set(&c.portal, id, network.as_deref()).await?)?,
    )
}

/// `PUT /portal/api/merchants/{id}/return-origins`.
pub async fn set_origins(mut c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let OriginsBody { return_origins } = c.json().await?;
    reply(
        200,
        to_json(&merchants::set_origins(&c.portal, id, &return_origins).await?)?,
    )
}

/// `POST /portal/api/merchants/{id}/roll-key`: a new publishable key.
pub async fn roll_key(mut c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let Rotate {
        grace_period_seconds,
    } = c.optional_json().await?;
    reply(
        200,
        to_json(&merchants::roll_key(&c.portal, id, grace_period_seconds).await?)?,
    )
}

/// `GET /portal/api/merchants/{id}/balances`: every balance, by network and asset.
pub async fn balances(c: Call<'_>, id: &str) -> Answer {
    let id = merchant_id(id)?;
    let data = balances::list(&c.portal, id).await?;
    reply(
        200,
        serde_json::json!({ "object": "list", "data": to_json(&data)? }),
    )
}

/// `GET /portal/api/merchants/{id}/balances/{network}/{token}`: one balance and a page of its
/// statement, newest first.
pub async fn statement(c: Call<'_>, id: &str, network: &str, token: &str) -> Answer {
    let id = merchant_id(id)?;
    let (balance, lines) = statement::statement(&c.portal, id, (network, token), c.query()).await?;
    let mut body = to_json(&lines)?;
    body["balance"] = to_json(&balance)?;
    reply(200, body)
}

/// `PUT /portal/api/merchants/{id}/balances/{network}/{token}/debt-limit`: how far the balance
/// may go into debt.
pub async fn set_debt_limit(mut c: Call<'_>, id: &str, network: &str, token: &str) -> Answer {
    let id = merchant_id(id)?;
    let DebtLimitBody { debt_limit } = c.json().await?;
    reply(
        200,
        to_json(
            &balances::debt_limit::set_debt_limit(&c.portal, id, (network, token), &debt_limit)
                .await?,
        )?,
    )
}
